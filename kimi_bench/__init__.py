"""kimi-bench: validate and benchmark deferred (raw uint8) image preprocessing.

The library is organised by the four parts of the change it studies:

- ``policy``       -- should a request's images be deferred (with reasons and byte counts)
- ``contract``     -- the uint8 item and the deferred-preprocessing record
- ``materialize``  -- resize -> composite -> normalize -> pad -> patchify on CPU or CUDA
- ``scheduler``    -- pre-embed move whitelist, vision-DP owner assignment, gather
"""

__version__ = "0.2.0"
SCHEMA_VERSION = 2
