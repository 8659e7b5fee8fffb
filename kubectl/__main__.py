from memorystore.kubectl.cli import main

raise SystemExit(main())
