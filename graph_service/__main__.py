from graph_service.cli import main

raise SystemExit(main())
