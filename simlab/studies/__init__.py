"""Studies: many scenarios at once.

- :mod:`~simlab.studies.grid` reads a scenario's ``sweep:`` block into points (field paths:
  :mod:`~simlab.studies.paths`);
- :mod:`~simlab.studies.sweep` runs them on an executor (:mod:`~simlab.studies.executors`: a local process pool
  or Dask) into a resumable folder with ``sweep.csv``;
- :mod:`~simlab.studies.whatif` searches, per arm, the largest load (or smallest capacity) meeting an SLA
  (:mod:`~simlab.studies.sla`);
- :mod:`~simlab.studies.report_html` writes the self-contained ``report.html`` of a run, a sweep or a what-if
  (figures: :mod:`~simlab.studies.plots`).

See docs/studies.md.
"""
