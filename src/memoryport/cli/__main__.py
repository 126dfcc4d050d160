from memoryport.cli import main

raise SystemExit(main())
