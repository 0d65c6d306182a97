from kmbench.cli import main

main()
