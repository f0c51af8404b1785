from mosbench.cli import main

main()
