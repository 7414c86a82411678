"""Tabular in-context learning: MotherNet's synthetic prior (`components.tabular.prior`), the hypernetwork and
the child MLP it writes (`components.tabular.mothernet`), the scikit-learn classifier around them
(`components.tabular.classifier`) and the real tables it is evaluated on (`components.tabular.tables`, which
imports no torch, so that data checks stay light). Import from the submodules."""
