"""``kubetrain ui``: a web UI over the same backend contract the CLI verbs use (``kubetrain.api.views.Backend``).

It sits beside ``kubetrain.cli`` (it may use the CLI's helpers; nothing below imports it) and needs the optional
extra ``pip install 'kubetrain[ui]'``. Pages are rendered on the server; changes reach the browser by server-sent
events from one watch per namespace scope, never by polling every TrainJob.
"""
