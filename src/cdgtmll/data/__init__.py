"""Dataset registry, acquisition, loaders and the shared processed format."""
