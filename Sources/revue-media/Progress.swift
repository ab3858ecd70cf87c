import RevueCommandLine

// Progress on stderr: a bar with percent, rate and ETA on a terminal; a line every few seconds
// otherwise; nothing with --quiet. Results go to stdout.
#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

#if canImport(Glibc)
    import Glibc
#endif

final class Progress {
    private let label: String
    private let total: Int?
    private let unit: String
    private let enabled: Bool
    private let isTTY: Bool
    private let start = Date()
    private var lastDraw: Date
    private var drawn = false
    private var done = 0

    init(label: String, total: Int?, unit: String, quiet: Bool) {
        self.label = label
        self.total = total
        self.unit = unit
        enabled = !quiet
        isTTY = isatty(2) != 0
        // On a terminal the bar appears at once; in a log the first line comes after a few
        // seconds, so quick jobs print nothing but their result.
        lastDraw = isTTY ? .distantPast : Date()
    }

    func update(_ done: Int) {
        self.done = done
        guard enabled else { return }
        let now = Date()
        let interval: TimeInterval = isTTY ? 0.1 : 3
        guard now.timeIntervalSince(lastDraw) >= interval else { return }
        lastDraw = now
        draw(final: false)
    }

    func finish() {
        guard enabled, drawn else { return }
        draw(final: true)
    }

    private func draw(final: Bool) {
        drawn = true
        let elapsed = max(1e-3, Date().timeIntervalSince(start))
        let rate = Double(done) / elapsed
        var line = "\(label): \(done)"
        if let total, total > 0 {
            let fraction = min(1, Double(done) / Double(total))
            let eta = rate > 0 ? Double(total - done) / rate : 0
            if isTTY {
                let width = 30, filled = Int(fraction * Double(width))
                line = "\(label) [" + String(repeating: "#", count: filled) + String(repeating: " ", count: width - filled) + "]"
            } else {
                line += "/\(total)"
            }
            let percent = (fraction * 100).fixed(0)
            line +=
                " \(String(repeating: " ", count: max(0, 3 - percent.count)))\(percent)% \(rate.fixed(1)) \(unit)/s ETA \((final ? 0 : eta).fixed(0))s"
        } else {
            line += " \(unit) \(rate.fixed(1)) \(unit)/s"
        }
        let text = isTTY ? "\r\u{1B}[K" + line + (final ? "\n" : "") : line + "\n"
        StandardStream.error(text)
    }
}
