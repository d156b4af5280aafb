"""The Dynamo boundary: the `lens` backend's entry (FX passes, AOTAutograd, the direct call) and its caches."""
