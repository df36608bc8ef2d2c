"""`srtd attach`: a running job's live state and control verbs over a local socket,
the replay of a finished job, and its startup timeline.  See docs/attach.md.

- `serve(job)`: the server, a supervisor `Service` (`srtd run` starts it)
- `Connection`, `connect`, `running_jobs`: the client side
- `render_view`, `render_timeline`, `Timeline`: the rich views (also used headless)

This package sits above the supervisor: it imports it, never the other way round.
"""
