"""Compute backends: the CPU reference and the CUDA implementation of one interface."""
