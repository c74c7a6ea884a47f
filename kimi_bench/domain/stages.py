"""The pipeline's stages in order, as micro times them on the critical path (each stage
ends when the slowest rank finished it; stage k lasts from boundary k-1 to boundary k).
A core module: reports, the gate and the pipeline all name stages from here."""

STAGES = (
    "producer",  # stage the images, the deferral decision, eager: preprocess on the device
    "hash",  # the producer's feature hash (runtime profile; SPEC section 12)
    "d2h",  # eager: one .cpu() per item of the FP32 patches
    "serialize",  # the carrier at the producer: shm copy-in or the inline pickle
    "to_rank0",  # the pickled request to scheduler rank 0 (tokenizer manager -> scheduler)
    "broadcast",  # broadcast_pyobj from rank 0 to every rank
    "take_copy",  # receivers: clone or copy-on-write map of shm features
    "pre_embed_move",  # models not whitelisted: every rank moves every item to its device
    "owner_h2d",  # the owner's H2D of its images (raw uint8 when deferred)
    "owner_materialize",  # resize/normalize/patchify on the owner, cast into the BF16 buffer
    "gather",  # the encoder-output gather (NCCL with a GPU per rank, metadata otherwise)
)
