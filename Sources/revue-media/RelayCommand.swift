// `revue-media relay`: the impairment relay (loss, bursts, delay, jitter, reordering,
// duplication, rate limit) between a sender and a receiver, both directions.
import MediaCore
import MediaTools
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

enum RelayCommand: Command {
    static let name = "relay"
    static let summary = "relay UDP between two peers, adding loss, delay, jitter, reordering and rate limits"
    static let help = """
        usage: revue-media \(ImpairmentRelay.Configuration.usage)
              --duration S       stop after S seconds (default: run until Ctrl-C)
              --json             print the final counters as JSON
              --quiet, -q        no periodic counters on stderr

        Datagrams arriving on --listen go to --to; replies from --to (RTCP feedback) go back to
        the last sender. Probabilities are fractions (--loss 0.05 is 5 %); numbers accept k and M
        suffixes (--rate 2M). Ctrl-C stops the relay and prints the counters of both directions.
        """

    /// Options whose values are numbers (suffixes are expanded before the relay parser sees them).
    static let numericOptions: Set<String> = [
        "--loss", "--burst", "--delay", "--jitter", "--reorder", "--reorder-delay",
        "--duplicate", "--rate", "--queue", "--seed",
    ]

    static func run(_ argv: [String]) throws -> Int32 {
        var relayArgs: [String] = []
        var duration: Double?
        var json = false, quiet = false
        var i = 0
        while i < argv.count {
            let arg = argv[i]
            switch arg {
            case "--duration":
                guard i + 1 < argv.count else { throw UsageError(description: "--duration needs a value") }
                guard let v = Arguments.parseNumber(argv[i + 1]), v > 0, v.isFinite else {
                    throw UsageError(description: "--duration \(argv[i + 1]): not a positive number of seconds")
                }
                duration = v
                i += 2
                continue
            case "--json": json = true
            case "--quiet", "-q": quiet = true
            default:
                if numericOptions.contains(arg), i + 1 < argv.count {
                    let raw = argv[i + 1]
                    var value = raw
                    if let last = raw.last, "kKmMgG".contains(last), let v = Arguments.parseNumber(raw) {
                        value = v == v.rounded() && abs(v) < 9e18 ? String(Int(v)) : String(v)
                    }
                    relayArgs += [arg, value]
                    i += 2
                    continue
                }
                relayArgs.append(arg)
            }
            i += 1
        }
        let configuration: ImpairmentRelay.Configuration
        do { configuration = try ImpairmentRelay.Configuration(arguments: relayArgs) } catch {
            throw UsageError(description: error.description)
        }
        let relay: ImpairmentRelay
        do { relay = try ImpairmentRelay(configuration: configuration) } catch {
            throw InputError(description: "cannot start the relay on \(configuration.listen) -> \(configuration.to): \(error)")
        }
        relay.start()
        if !quiet { Console.error("relay: \(relay.listenAddress) -> \(configuration.to) (from \(relay.upstreamAddress))") }
        let start = Date()
        var lastReport = Date()
        while !Interrupt.requested {
            if let duration, Date().timeIntervalSince(start) >= duration { break }
            usleep(50_000)
            if !quiet && Date().timeIntervalSince(lastReport) >= 5 {
                lastReport = Date()
                let s = relay.statistics
                Console.error(
                    "relay: forward \(s.forward.received) in, \(s.forward.forwarded) out, \(s.forward.droppedByLoss + s.forward.droppedByQueue) dropped; "
                        + "reverse \(s.reverse.received) in, \(s.reverse.forwarded) out")
            }
        }
        relay.stop()
        let s = relay.statistics
        if json {
            Console.out(
                JSON.object([
                    ("listen", .string(relay.listenAddress.description)), ("to", .string(configuration.to.description)),
                    ("seconds", JSON.rounded(Date().timeIntervalSince(start), 3)),
                    ("forward", directionJSON(s.forward)), ("reverse", directionJSON(s.reverse)),
                ]).rendered())
        } else {
            Console.out(
                """
                relay \(relay.listenAddress) -> \(configuration.to), \(Date().timeIntervalSince(start).fixed(1)) s
                  forward: \(directionText(s.forward))
                  reverse: \(directionText(s.reverse))
                """)
        }
        return 0
    }

    static func directionText(_ d: ImpairmentRelay.DirectionStatistics) -> String {
        "\(d.received) received, \(d.forwarded) forwarded, \(d.droppedByLoss) lost, \(d.droppedByQueue) queue drops, "
            + "\(d.duplicated) duplicated, \(d.reordered) reordered"
    }

    static func directionJSON(_ d: ImpairmentRelay.DirectionStatistics) -> JSON {
        .object([
            ("received", .int(d.received)), ("bytesReceived", .int(d.bytesReceived)), ("forwarded", .int(d.forwarded)),
            ("bytesForwarded", .int(d.bytesForwarded)), ("droppedByLoss", .int(d.droppedByLoss)),
            ("droppedByQueue", .int(d.droppedByQueue)), ("droppedByOverflow", .int(d.droppedByOverflow)),
            ("duplicated", .int(d.duplicated)), ("reordered", .int(d.reordered)), ("truncated", .int(d.truncated)),
        ])
    }
}
