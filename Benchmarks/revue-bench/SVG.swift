// SVG bar charts of ours against each anchor, written without any plotting dependency.
import Foundation

enum SVGChart {
    /// One chart per suite: for each case with an anchor, a bar for ours and one for the anchor,
    /// scaled to the larger of the two, with the ratio printed; a case without an anchor (a
    /// latency percentile, the memory suite's peak and growth of a call) gets one bar, scaled to the
    /// largest figure of the same metric and unit in the suite. Returns the file names written.
    static func write(records: [BenchRecord], to directory: String) throws -> [String] {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        var written: [String] = []
        let suites = Dictionary(grouping: records, by: \.suite)
        for (suite, rows) in suites.sorted(by: { $0.key < $1.key }) {
            var top: [String: Double] = [:]  // by metric and unit
            for r in rows {
                top[r.metric + "|" + r.unit] = max(top[r.metric + "|" + r.unit] ?? 0, abs(r.ours), abs(r.anchor ?? 0))
            }
            let rowHeight = 46, width = 760, labelWidth = 300, barMax = 360
            let height = 40 + rows.count * rowHeight + 20
            var svg = """
                <svg xmlns="http://www.w3.org/2000/svg" width="\(width)" height="\(height)" font-family="sans-serif" font-size="12">
                <text x="10" y="20" font-size="15" font-weight="bold">\(escape(suite)): ours (blue) vs anchor (grey)</text>

                """
            for (i, r) in rows.enumerated() {
                let y = 36 + i * rowHeight
                guard let anchor = r.anchor else {
                    let wo = Int(Double(barMax) * max(0, r.ours) / max(top[r.metric + "|" + r.unit] ?? 0, 1e-12))
                    svg += """
                        <text x="10" y="\(y + 14)">\(escape(r.case)) — \(escape(r.metric)) (\(escape(r.unit)))</text>
                        <text x="10" y="\(y + 30)" fill="#555">no anchor</text>
                        <rect x="\(labelWidth)" y="\(y + 2)" width="\(wo)" height="16" fill="#2f6fde"/>
                        <text x="\(labelWidth + wo + 4)" y="\(y + 15)">\(String(format: "%.4g", r.ours))</text>

                        """
                    continue
                }
                let top = max(r.ours, anchor, 1e-12)
                let wo = Int(Double(barMax) * r.ours / top), wa = Int(Double(barMax) * anchor / top)
                let ratio = r.ratio.map { String(format: "%.2fx", $0) } ?? ""
                svg += """
                    <text x="10" y="\(y + 14)">\(escape(r.case)) — \(escape(r.metric)) (\(escape(r.unit)))</text>
                    <text x="10" y="\(y + 30)" fill="#555">vs \(escape(r.anchorName ?? "")): \(ratio)</text>
                    <rect x="\(labelWidth)" y="\(y + 2)" width="\(wo)" height="16" fill="#2f6fde"/>
                    <text x="\(labelWidth + wo + 4)" y="\(y + 15)">\(String(format: "%.4g", r.ours))</text>
                    <rect x="\(labelWidth)" y="\(y + 20)" width="\(wa)" height="16" fill="#999"/>
                    <text x="\(labelWidth + wa + 4)" y="\(y + 33)">\(String(format: "%.4g", anchor))</text>

                    """
            }
            svg += "</svg>\n"
            let name = "\(suite).svg"
            try svg.write(toFile: (directory as NSString).appendingPathComponent(name), atomically: true, encoding: .utf8)
            written.append(name)
        }
        return written
    }

    /// A line chart of the congestion suite's runs: the capacity as a grey step, each run's rate
    /// through the bottleneck as a solid line and its own estimate as a dashed one (Revue blue,
    /// Chromium orange, Revue to Chromium green, Chromium to Revue purple), the TCP flow's rate dotted when there is one. Writes `name`.svg into
    /// `directory` and returns its path. Thread rule: any thread. Cost: a string per point.
    static func writeRates(
        title: String, phases: [CongestionSuite.Phase], runs: [CongestionSuite.Run], to directory: String, name: String
    ) throws -> String {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let width = 860.0, height = 380.0, left = 60.0, right = 190.0, top = 36.0, bottom = 40.0
        let seconds = phases.reduce(0) { $0 + $1.seconds }
        let yMax = 3_500_000.0
        func x(_ t: Double) -> Double { left + (width - left - right) * min(max(t, 0), seconds) / seconds }
        func y(_ bps: Double) -> Double { top + (height - top - bottom) * (1 - min(max(bps, 0), yMax) / yMax) }
        func line(_ points: [(t: Double, bps: Double)], _ colour: String, _ dash: String) -> String {
            guard !points.isEmpty else { return "" }
            let d = points.map { String(format: "%.1f,%.1f", x($0.t), y($0.bps)) }.joined(separator: " ")
            return "<polyline fill=\"none\" stroke=\"\(colour)\" stroke-width=\"1.6\" \(dash) points=\"\(d)\"/>\n"
        }
        var svg = """
            <svg xmlns="http://www.w3.org/2000/svg" width="\(Int(width))" height="\(Int(height))" font-family="sans-serif" font-size="12">
            <rect width="100%" height="100%" fill="white"/>
            <text x="10" y="20" font-size="14" font-weight="bold">\(escape(title))</text>

            """
        for mbit in stride(from: 0.0, through: yMax / 1e6, by: 0.5) {
            let yy = y(mbit * 1e6)
            svg += "<line x1=\"\(left)\" y1=\"\(yy)\" x2=\"\(width - right)\" y2=\"\(yy)\" stroke=\"#eee\"/>"
            svg += "<text x=\"\(left - 6)\" y=\"\(yy + 4)\" text-anchor=\"end\">\(mbit)</text>\n"
        }
        for t in stride(from: 0.0, through: seconds, by: 10) {
            svg += "<text x=\"\(x(t))\" y=\"\(height - bottom + 16)\" text-anchor=\"middle\">\(Int(t))</text>\n"
        }
        svg += "<text x=\"\(left + (width - left - right) / 2)\" y=\"\(height - 6)\" text-anchor=\"middle\">seconds</text>\n"
        svg += "<text x=\"14\" y=\"\(top + 140)\" transform=\"rotate(-90 14 \(top + 140))\">Mbit/s</text>\n"
        var capacity: [(t: Double, bps: Double)] = []
        var t0 = 0.0
        for p in phases {
            capacity.append((t0, Double(p.kbit) * 1000))
            capacity.append((t0 + p.seconds, Double(p.kbit) * 1000))
            t0 += p.seconds
        }
        svg += line(capacity, "#888", "stroke-dasharray=\"1 0\"")
        var legend: [(String, String, String)] = [("capacity", "#888", "")]
        for run in runs {
            let colours = ["Revue": "#2f6fde", "Chromium": "#e8731a", "Revue to Chromium": "#2a9d4b"]
            let colour = colours[run.sender] ?? "#8e44ad"
            svg += line(run.rate, colour, "")
            svg += line(run.estimate, colour, "stroke-dasharray=\"5 3\"")
            legend.append(("\(run.sender) rate", colour, ""))
            legend.append(("\(run.sender) estimate", colour, "stroke-dasharray=\"5 3\""))
            if !run.tcp.isEmpty {
                svg += line(run.tcp, colour, "stroke-dasharray=\"1 3\"")
                legend.append(("TCP beside \(run.sender)", colour, "stroke-dasharray=\"1 3\""))
            }
        }
        for (i, item) in legend.enumerated() {
            let yy = top + 10 + Double(i) * 18, xx = width - right + 10
            svg +=
                "<line x1=\"\(xx)\" y1=\"\(yy)\" x2=\"\(xx + 24)\" y2=\"\(yy)\" stroke=\"\(item.1)\" stroke-width=\"2\" \(item.2)/>"
            svg += "<text x=\"\(xx + 30)\" y=\"\(yy + 4)\">\(escape(item.0))</text>\n"
        }
        svg += "</svg>\n"
        let file = (directory as NSString).appendingPathComponent(name + ".svg")
        try svg.write(toFile: file, atomically: true, encoding: .utf8)
        return file
    }

    private static func escape(_ s: String) -> String {
        s.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;").replacingOccurrences(
            of: ">", with: "&gt;")
    }
}
