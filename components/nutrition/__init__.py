"""Carbohydrate estimation from meal descriptions (NutriBench): the food table, meal curation, the real
data reader, the answer parser and metrics, the non-LLM baselines and the LLM prompting strategies."""
