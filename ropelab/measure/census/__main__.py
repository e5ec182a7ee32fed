"""``python -m ropelab.measure.census``: print the census table (``python -m ropelab census``
has the options)."""

from .registered import census, format_table

print(format_table(census(progress=True)))
