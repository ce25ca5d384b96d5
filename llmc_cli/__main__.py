from llmc_cli.cli.main import main

main()
