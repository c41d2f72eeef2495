"""One model through the stages in a worker, and all models through the pool."""
