// revue-bench: every hot path measured side by side with its anchor (see docs/performance.md).
import MediaCore
import Foundation
#if canImport(Glibc)
import Glibc
#endif

#if DEBUG
FileHandle.standardError.write(Data("revue-bench: refusing to report figures from a debug build; use `swift run -c release revue-bench`\n".utf8))
exit(2)
#else
print("revue-bench: no suites yet")
#endif
