// revue-media: Revue's file-based command line (encode, decode, send, receive, probe, relay, demo).
import RevueSDK
import Foundation
#if canImport(Glibc)
import Glibc
#endif

let usage = """
usage: revue-media COMMAND [options]

commands:
  demo      run a full call in one process and report what was received
  --help    show this text
"""

let args = Array(CommandLine.arguments.dropFirst())
if args.isEmpty || args.first == "--help" || args.first == "-h" {
    print(usage)
    exit(args.isEmpty ? 2 : 0)
}
FileHandleStderr.write("revue-media: unknown command '\(args[0])'\n\(usage)\n")
exit(2)

enum FileHandleStderr {
    static func write(_ s: String) { FileHandle.standardError.write(Data(s.utf8)) }
}
