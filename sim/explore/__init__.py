"""Layer 4, exploration: many runs -- the crash sweep (naive and forked), fuzzing, mutants, and the
reach measurement. Imports only the layers below."""
