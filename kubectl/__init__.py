"""`kubectl memorystore`: the stores as a platform team works them (a kubectl plugin).

`kube.py` speaks to the cluster through kubectl itself (the user's kubeconfig, context and
credentials, as every kubectl plugin does); `report.py` renders what is read (pure);
`store_api.py` reaches a store's memory service through `kubectl port-forward` with the
store's own key and CA; `cli.py` is the commands. docs/operations/kubectl-plugin.md.
"""
