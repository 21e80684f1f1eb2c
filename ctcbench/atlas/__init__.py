"""``ctcbench atlas``: which CTC bugs of the atlas (cases/atlas.toml) the installed stack has."""
