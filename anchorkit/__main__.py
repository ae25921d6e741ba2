from anchorkit.cli import app

app(prog_name="anchorkit")
