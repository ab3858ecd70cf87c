// revue-node: a headless Revue peer driven by JSON lines on stdin (see docs/revue-node.md).
import RevueSDK
import Foundation
#if canImport(Glibc)
import Glibc
#endif

FileHandle.standardError.write(Data("revue-node: the session layer is not built yet (issue 7)\n".utf8))
exit(1)
