from graph_service.entrypoints.cli import main

raise SystemExit(main())
