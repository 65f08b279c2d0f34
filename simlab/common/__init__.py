"""The ground floor every package may import, and which imports nothing else of simlab: errors meant for
people (:mod:`~simlab.common.errors`, :mod:`~simlab.common.schema_errors`), the strict base model, lazy package
exports, common random numbers (:mod:`~simlab.common.crn`), the shipped files, reading YAML and writing JSON,
the rule every writer follows (:mod:`~simlab.common.outputs`) and the version."""
