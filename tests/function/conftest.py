# scratch/ is a project under test that the recipe tests copy and run, not tests of ours
collect_ignore = ["scratch"]
