"""Sessions as the unit of load: conversations and agent traces whose turns wait for
the server's previous answer. The data model (turn), the readers of each dataset kind
(jsonl, sharegpt, weka, synthetic) and their sizing (rows), and the loops that send
sessions (runner); the ``sessions`` load kind is :mod:`kvlab.bench.plan.loads.sessions`."""
