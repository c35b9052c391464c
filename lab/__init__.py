"""The offline lab: replay, evaluate, plot and plan on the embedded simulator (nothing here runs in the pod)."""
