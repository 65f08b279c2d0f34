"""What a run produces, in the order it is made (each module imports only the ones before it):

- :mod:`~simlab.results.records`: the columns of the per-request and per-step tables, shared by the simulator
  and real mode;
- :mod:`~simlab.results.metrics`: records to the summary metrics (vLLM's benchmark names);
- :mod:`~simlab.results.overload`: warnings that an arm was overloaded, from its request records;
- :mod:`~simlab.results.folder`: the results folder (summary.json, requests.csv, steps.csv.gz), written
  atomically and read back;
- :mod:`~simlab.results.table`: the terminal table comparing arms;
- :mod:`~simlab.results.figure`: ``report.png``, the one-page picture of a run.

Nothing here imports the engine, the runner or a command: real mode and the studies read and write the same files.
"""
