"""Measurements that are not a kernel variant: controlled experiments behind the course's claims.

* :mod:`.seed_claims`: the kernels, PTX counts and GPU timing that the seed-claims ledger
  (notebook 07, README "Seed claims") needs and the variants do not contain.
"""
