"""test_layout.py: The house: commands over one library, imports that point down (the root never
imports the studies, the library never a command), the map in studies/README.md against the tree,
every claim's named function, the size limits, regenerate.sh.

Run from the repository's root: python -m pytest -q
"""
import glob
import os


from test_all import HERE


def test_regenerate_sh_writes_every_table_under_results():
    # a table over several folders that results/regenerate.sh does not write could not be made
    # again from the runs: each is named there (its variables expanded), or listed as left out
    script = open(os.path.join(HERE, "results", "regenerate.sh")).read()
    named = script.replace("$S/", "results/protocols/").replace("$W/", "results/width/") \
        .replace("$F/", "results/families/")
    for path in glob.glob(os.path.join(HERE, "results", "**", "*.md"), recursive=True):
        rel = os.path.relpath(path, HERE).replace(os.sep, "/")
        where = os.path.dirname(path)
        own = os.path.basename(rel) in ("table.md", "against.md") and any(
            os.path.exists(os.path.join(where, f)) for f in ("sweep.json", "steps.json", "plan.json"))
        if os.path.basename(rel) != "README.md" and not own:
            assert rel in named, f"{rel}: not written by results/regenerate.sh"
    assert "results/protocols/mingpt-summed-batch.md (the old minGPT table" in script
