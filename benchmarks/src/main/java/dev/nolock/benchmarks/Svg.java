package dev.nolock.benchmarks;

import java.util.List;
import java.util.Locale;

/**
 * The two charts the report draws, as inline SVG. Written by hand because the charting libraries
 * that render to SVG (JFreeChart with JFreeSVG, XChart) measure text through AWT fonts, which
 * headless CI machines often lack, and a report page should open offline with no script.
 */
final class Svg {

  static final String[] COLOURS = {
    "#1b6ca8", "#d1495b", "#edae49", "#00798c", "#66a182", "#8d6a9f", "#30638e", "#a0a0a0"
  };

  private static final int WIDTH = 760;
  private static final int HEIGHT = 300;
  private static final int LEFT = 70;
  private static final int RIGHT = 190;
  private static final int TOP = 30;
  private static final int BOTTOM = 50;

  /** One bar series: a label and a value per category (NaN: not measured). */
  record Series(String label, double[] values) {}

  /** One line: a label and points (x, y). */
  record Line(String label, List<double[]> points) {}

  private Svg() {}

  static String bars(String title, String unit, List<String> categories, List<Series> series) {
    double max =
        series.stream()
            .flatMapToDouble(s -> java.util.Arrays.stream(s.values()))
            .filter(v -> !Double.isNaN(v))
            .max()
            .orElse(1);
    double top = niceCeiling(max);
    StringBuilder svg = open(title);
    int plotWidth = WIDTH - LEFT - RIGHT;
    int plotHeight = HEIGHT - TOP - BOTTOM;
    for (int tick = 0; tick <= 4; tick++) {
      double value = top * tick / 4;
      double y = TOP + plotHeight - plotHeight * tick / 4.0;
      svg.append(line(LEFT, y, LEFT + plotWidth, y, "#e0e0e0"));
      svg.append(text(LEFT - 6, y + 4, "end", compact(value)));
    }
    svg.append(
        text(
            14,
            TOP + plotHeight / 2.0,
            "middle",
            unit,
            "rotate(-90 14 " + (TOP + plotHeight / 2) + ")"));
    double groupWidth = (double) plotWidth / Math.max(1, categories.size());
    double barWidth = groupWidth * 0.8 / Math.max(1, series.size());
    for (int c = 0; c < categories.size(); c++) {
      double groupLeft = LEFT + c * groupWidth + groupWidth * 0.1;
      svg.append(
          text(groupLeft + groupWidth * 0.4, HEIGHT - BOTTOM + 16, "middle", categories.get(c)));
      for (int s = 0; s < series.size(); s++) {
        double value = series.get(s).values()[c];
        if (Double.isNaN(value)) {
          continue;
        }
        double h = plotHeight * value / top;
        svg.append(
            String.format(
                Locale.ROOT,
                "<rect x='%.1f' y='%.1f' width='%.1f' height='%.1f' fill='%s'><title>%s:"
                    + " %s</title></rect>%n",
                groupLeft + s * barWidth,
                TOP + plotHeight - h,
                barWidth - 1,
                h,
                COLOURS[s % COLOURS.length],
                escape(series.get(s).label()),
                compact(value)));
      }
    }
    legend(svg, series.stream().map(Series::label).toList());
    return svg.append("</svg>\n").toString();
  }

  /**
   * Lines over time with {@code [shadeFrom, shadeTo]} on x shaded (the stall); the y axis is log10
   * when {@code log} (points at or below zero are left out), linear from zero otherwise.
   */
  static String lines(
      String title,
      String xUnit,
      String yUnit,
      List<Line> lines,
      double shadeFrom,
      double shadeTo,
      boolean log) {
    double maxX =
        lines.stream().flatMap(l -> l.points().stream()).mapToDouble(p -> p[0]).max().orElse(1);
    double maxY =
        lines.stream().flatMap(l -> l.points().stream()).mapToDouble(p -> p[1]).max().orElse(1);
    double minY =
        lines.stream()
            .flatMap(l -> l.points().stream())
            .mapToDouble(p -> p[1])
            .filter(v -> v > 0)
            .min()
            .orElse(0.1);
    // In log mode the axis runs over decades; in linear mode from 0 to a round ceiling.
    double low = log ? Math.floor(Math.log10(Math.max(minY, 1e-3))) : 0;
    double high = log ? Math.ceil(Math.log10(Math.max(maxY, 1e-3))) : niceCeiling(maxY);
    if (high <= low) {
      high = low + 1;
    }
    StringBuilder svg = open(title);
    int plotWidth = WIDTH - LEFT - RIGHT;
    int plotHeight = HEIGHT - TOP - BOTTOM;
    double x0 = LEFT + plotWidth * shadeFrom / maxX;
    double x1 = LEFT + plotWidth * shadeTo / maxX;
    svg.append(
        String.format(
            Locale.ROOT,
            "<rect x='%.1f' y='%d' width='%.1f' height='%d' fill='#f4e3c1'><title>the"
                + " stall</title></rect>%n",
            x0,
            TOP,
            x1 - x0,
            plotHeight));
    int ticks = log ? (int) (high - low) : 5;
    for (int tick = 0; tick <= ticks; tick++) {
      double value = low + (high - low) * tick / ticks;
      double y = TOP + plotHeight - plotHeight * (value - low) / (high - low);
      svg.append(line(LEFT, y, LEFT + plotWidth, y, "#e0e0e0"));
      svg.append(text(LEFT - 6, y + 4, "end", compact(log ? Math.pow(10, value) : value)));
    }
    for (int second = 0; second <= (int) maxX; second++) {
      double x = LEFT + plotWidth * second / maxX;
      svg.append(text(x, HEIGHT - BOTTOM + 16, "middle", Integer.toString(second)));
    }
    svg.append(text(LEFT + plotWidth / 2.0, HEIGHT - 12, "middle", xUnit));
    svg.append(
        text(
            14,
            TOP + plotHeight / 2.0,
            "middle",
            yUnit,
            "rotate(-90 14 " + (TOP + plotHeight / 2) + ")"));
    for (int i = 0; i < lines.size(); i++) {
      StringBuilder path = new StringBuilder();
      for (double[] point : lines.get(i).points()) {
        if (log && point[1] <= 0) {
          continue;
        }
        double x = LEFT + plotWidth * point[0] / maxX;
        double value = log ? Math.max(Math.log10(point[1]), low) : point[1];
        double y = TOP + plotHeight - plotHeight * (value - low) / (high - low);
        path.append(path.length() == 0 ? "M" : " L")
            .append(String.format(Locale.ROOT, "%.1f %.1f", x, y));
      }
      svg.append(
          String.format(
              "<path d='%s' fill='none' stroke='%s' stroke-width='1.6'><title>%s</title></path>%n",
              path, COLOURS[i % COLOURS.length], escape(lines.get(i).label())));
    }
    legend(svg, lines.stream().map(Line::label).toList());
    return svg.append("</svg>\n").toString();
  }

  private static StringBuilder open(String title) {
    StringBuilder svg = new StringBuilder();
    svg.append(
        String.format(
            "<svg xmlns='http://www.w3.org/2000/svg' width='%d' height='%d'"
                + " font-family='sans-serif' font-size='11'>%n",
            WIDTH, HEIGHT));
    svg.append(text(LEFT, 16, "start", title, null).replace("<text", "<text font-weight='bold'"));
    return svg;
  }

  private static void legend(StringBuilder svg, List<String> labels) {
    int x = WIDTH - RIGHT + 10;
    for (int i = 0; i < labels.size(); i++) {
      int y = TOP + 4 + i * 30;
      svg.append(
          String.format(
              "<rect x='%d' y='%d' width='10' height='10' fill='%s'/>%n",
              x, y, COLOURS[i % COLOURS.length]));
      List<String> wrapped = wrap(labels.get(i), 28);
      for (int l = 0; l < wrapped.size() && l < 2; l++) {
        svg.append(text(x + 14, y + 9 + l * 12, "start", wrapped.get(l)));
      }
    }
  }

  private static List<String> wrap(String label, int width) {
    if (label.length() <= width) {
      return List.of(label);
    }
    int cut = label.lastIndexOf(' ', width);
    cut = cut <= 0 ? width : cut;
    return List.of(label.substring(0, cut), label.substring(cut).trim());
  }

  private static String line(double x1, double y1, double x2, double y2, String colour) {
    return String.format(
        Locale.ROOT,
        "<line x1='%.1f' y1='%.1f' x2='%.1f' y2='%.1f' stroke='%s'/>%n",
        x1,
        y1,
        x2,
        y2,
        colour);
  }

  private static String text(double x, double y, String anchor, String text) {
    return text(x, y, anchor, text, null);
  }

  private static String text(double x, double y, String anchor, String text, String transform) {
    return String.format(
        Locale.ROOT,
        "<text x='%.1f' y='%.1f' text-anchor='%s'%s>%s</text>%n",
        x,
        y,
        anchor,
        transform == null ? "" : " transform='" + transform + "'",
        escape(text));
  }

  static String compact(double value) {
    if (value >= 1e6) {
      return String.format(Locale.ROOT, "%.1fM", value / 1e6);
    }
    if (value >= 1e4) {
      return String.format(Locale.ROOT, "%.0fk", value / 1e3);
    }
    if (value >= 1e3) {
      return String.format(Locale.ROOT, "%.1fk", value / 1e3);
    }
    if (value >= 10 || value == 0) {
      return String.format(Locale.ROOT, "%.0f", value);
    }
    return String.format(Locale.ROOT, "%.2g", value);
  }

  private static double niceCeiling(double value) {
    if (value <= 0) {
      return 1;
    }
    double magnitude = Math.pow(10, Math.floor(Math.log10(value)));
    for (double step : new double[] {1, 2, 2.5, 5, 10}) {
      if (step * magnitude >= value) {
        return step * magnitude;
      }
    }
    return 10 * magnitude;
  }

  static String escape(String text) {
    return text.replace("&", "&amp;")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace("'", "&#39;");
  }
}
