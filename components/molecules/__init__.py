"""Molecules and activity cliffs: MoleculeACE's data (:mod:`.moleculeace`), the RDKit featuriser
(:mod:`.featurize`: ECFP bits, Tanimoto, scaffold and SMILES similarity), MoleculeACE's cliff definition and the
similarity graph (:mod:`.cliffs`), its metrics (:mod:`.metrics`: RMSE, RMSE_cliff), torch-geometric graphs
(:mod:`.graphs`), the ECFP-MLP / GIN network with its heads (:mod:`.encoders`) and the training objectives
(:mod:`.lac`: MSE, the LAC node + edge tasks, clsar's ACA loss). Importing the package loads nothing heavy."""
