"""What CI trusts: rules (``rules``), the figures recomputed from a report's raw data
(``evidence``), rules applied to reports (``gate``), baselines and relative rules
(``baseline``), two runs side by side (``compare``, ``comparable``) and change points over a
run history (``history``). These modules read reports only; they never run a benchmark."""
