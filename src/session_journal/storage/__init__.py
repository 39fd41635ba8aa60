"""The storage machinery under the services, not API: engines and the one seam below
SQLAlchemy (`engines`, `driver`), the write path and its calls (`write_path`, `calls`),
transactions the caller owns (`bound`), what the services and the followers (`follow`, the layer
above) see of it (`protocols`) and its SQL forms (`unit_of_work`,
`repositories/`, `models`), and the canonical-body marks after an upgrade (`backfill`).

Import the public surface instead (`session_journal`, `session_journal.aio`): what is here may
change in any release. Importing this package alone loads nothing (no SQLAlchemy).
"""
