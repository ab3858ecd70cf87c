// RevueSDK: the umbrella module. `import RevueSDK` gives a program the whole public API of the
// engine (MediaCore) and of the session layer (RevueSession), as the reference documents it.
@_exported import MediaCore
@_exported import RevueSession
