"""Imitation learning: the corridor gridworld, demonstrations, MINE / PMI, conditional and PMI-weighted BC."""
