"""The process engine: worker processes, their launch and clocks, the workers of micro and the
HTTP emulator, stand-in costs and the built-in images. Imports the pipeline and core only."""
