"""Who may call the worker: bearer tokens, their checks, and the sites a request may come from.

* :mod:`~sparkfn.worker.auth.tokens`: signing and verifying the JWTs.
* :mod:`~sparkfn.worker.auth.access`: the middleware and checks that decide
  which route a token's role may use.
* :mod:`~sparkfn.worker.auth.origins`: refusing foreign Host and Origin headers.

It sits below the worker's settings (which load the token keys) and takes
the keys it checks with as arguments, so it needs nothing from above.
"""
