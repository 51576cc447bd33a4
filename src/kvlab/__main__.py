from kvlab.cli import main

main()
