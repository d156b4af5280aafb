"""FX-level passes over Dynamo's graph before AOTAutograd (their order: `compiler.pipeline.FX_PASSES`), with the FX
helpers they share."""
