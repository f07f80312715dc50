"""Spark itself: the session, its JVM, and the Python processes Spark starts (daemon, zygote, launcher), with per-package import isolation."""
