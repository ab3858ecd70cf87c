// revue-media: Revue's file-based command line (encode, decode, send, receive, probe, relay, demo, webrtc).
// Exit status: 0 success, 1 bad input (a file or stream that cannot be used), 2 bad usage.
import MediaCore
import RevueCommandLine
import RevueSession

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

#if canImport(Glibc)
    import Glibc
#endif

let commands: [any Command.Type] = [
    EncodeCommand.self, DecodeCommand.self, SendCommand.self, ReceiveCommand.self, ProbeCommand.self, RelayCommand.self,
    DemoCommand.self, WebRTCCommand.self,
]

let usage = """
    usage: revue-media COMMAND [options]

    commands:
    \(commands.map { "  " + $0.name.padded(to: 10) + $0.summary }.joined(separator: "\n"))

    `revue-media COMMAND --help` describes a command. Numbers accept k and M suffixes (1500k).
    Exit status: 0 success, 1 bad input, 2 bad usage.
    """

let args = Array(CommandLine.arguments.dropFirst())
if args.isEmpty || args.first == "--help" || args.first == "-h" || args.first == "help" {
    if args.count >= 2, let command = commands.first(where: { $0.name == args[1] }) {
        print(command.help)
        exit(0)
    }
    if args.isEmpty { Console.error(usage); exit(2) }
    print(usage)
    exit(0)
}
guard let command = commands.first(where: { $0.name == args[0] }) else {
    Console.error(
        "revue-media: unknown command '\(args[0])' (commands: \(commands.map { $0.name }.joined(separator: ", ")))\n"
            + "run 'revue-media --help' for usage")
    exit(2)
}
let rest = Array(args.dropFirst())
if wantsHelp(rest) {
    print(command.help)
    exit(0)
}
Interrupt.install()
runTool("revue-media \(command.name)") { try command.run(rest) }
