from onnx_parity.cli import main

raise SystemExit(main())
