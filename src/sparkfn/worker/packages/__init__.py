"""Uploaded function packages: stored by digest, laid out for import, owned per tenant.

* :mod:`~sparkfn.worker.packages.store`: the :class:`PackageStore` of uploads.
* :mod:`~sparkfn.worker.packages.owners`: which tenants hold which package.
* :mod:`~sparkfn.worker.packages.layout`: how a stored package sits on disk.
* :mod:`~sparkfn.worker.packages.archives`: unpacking an upload without trusting it.
* :mod:`~sparkfn.worker.packages.dependencies`: installing a package's wheels
  into its own directory.
"""
