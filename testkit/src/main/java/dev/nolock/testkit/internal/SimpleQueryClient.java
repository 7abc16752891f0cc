package dev.nolock.testkit.internal;

import static java.nio.charset.StandardCharsets.UTF_8;

import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Runs one statement over the PostgreSQL wire protocol's simple-query flow, with nothing else sent.
 * This exists for PgBouncer's admin console: pgjdbc 42.7.5 and later send {@code SET
 * extra_float_digits} right after connecting, which the console of PgBouncer 1.18 (Debian's)
 * refuses with {@code SET failed}, so pgjdbc cannot open it at all.
 *
 * <p>Supports trust, cleartext and MD5 authentication, no TLS; SCRAM is refused with a message.
 */
public final class SimpleQueryClient {

  private static final int PROTOCOL_3_0 = 196_608;

  private SimpleQueryClient() {}

  /**
   * Connects to {@code database} as {@code user}, runs {@code sql} and returns its rows as column
   * name to text value, in order.
   *
   * @throws IOException on a network failure or an {@code ErrorResponse} (its message is kept)
   */
  public static List<Map<String, String>> query(
      HostPort host, String user, String password, String database, String sql, Duration timeout)
      throws IOException {
    try (Socket socket = new Socket()) {
      socket.connect(new InetSocketAddress(host.host(), host.port()), (int) timeout.toMillis());
      socket.setSoTimeout((int) timeout.toMillis());
      DataInputStream in = new DataInputStream(new BufferedInputStream(socket.getInputStream()));
      DataOutputStream out =
          new DataOutputStream(new BufferedOutputStream(socket.getOutputStream()));
      startup(out, user, database);
      authenticate(in, out, user, password);
      send(out, 'Q', cstring(sql));
      List<Map<String, String>> rows = readResult(in);
      send(out, 'X', new byte[0]);
      return rows;
    }
  }

  private static void startup(DataOutputStream out, String user, String database)
      throws IOException {
    ByteArrayOutputStream body = new ByteArrayOutputStream();
    DataOutputStream data = new DataOutputStream(body);
    data.writeInt(PROTOCOL_3_0);
    data.write(cstring("user"));
    data.write(cstring(user));
    data.write(cstring("database"));
    data.write(cstring(database));
    data.writeByte(0);
    out.writeInt(body.size() + 4);
    body.writeTo(out);
    out.flush();
  }

  private static void authenticate(
      DataInputStream in, DataOutputStream out, String user, String password) throws IOException {
    while (true) {
      Message message = read(in);
      switch (message.type()) {
        case 'R' -> {
          DataInputStream body = message.body();
          int code = body.readInt();
          switch (code) {
            case 0 -> {}
            case 3 -> send(out, 'p', cstring(requirePassword(password)));
            case 5 -> {
              byte[] salt = body.readNBytes(4);
              send(out, 'p', cstring(md5Password(user, requirePassword(password), salt)));
            }
            default ->
                throw new IOException(
                    "authentication method "
                        + code
                        + " is not supported here (only trust, password and md5)");
          }
        }
        case 'E' -> throw new IOException(errorText(message));
        case 'Z' -> {
          return;
        }
        default -> {
          // ParameterStatus, BackendKeyData, notices: nothing to act on.
        }
      }
    }
  }

  private static List<Map<String, String>> readResult(DataInputStream in) throws IOException {
    List<String> columns = List.of();
    List<Map<String, String>> rows = new ArrayList<>();
    IOException error = null;
    while (true) {
      Message message = read(in);
      switch (message.type()) {
        case 'T' -> columns = columns(message.body());
        case 'D' -> rows.add(row(message.body(), columns));
        case 'E' -> error = new IOException(errorText(message));
        case 'Z' -> {
          if (error != null) {
            throw error;
          }
          return rows;
        }
        default -> {
          // CommandComplete, notices.
        }
      }
    }
  }

  private static List<String> columns(DataInputStream body) throws IOException {
    int count = body.readUnsignedShort();
    List<String> names = new ArrayList<>(count);
    for (int i = 0; i < count; i++) {
      names.add(readCString(body));
      body.skipNBytes(18); // table oid, column number, type oid, size, modifier, format
    }
    return names;
  }

  private static Map<String, String> row(DataInputStream body, List<String> columns)
      throws IOException {
    int count = body.readUnsignedShort();
    Map<String, String> row = new LinkedHashMap<>();
    for (int i = 0; i < count; i++) {
      int length = body.readInt();
      String value = length < 0 ? null : new String(body.readNBytes(length), UTF_8);
      row.put(i < columns.size() ? columns.get(i) : "column" + i, value);
    }
    return row;
  }

  private static String errorText(Message message) throws IOException {
    DataInputStream body = message.body();
    String severity = "ERROR";
    String text = "";
    for (int field = body.readUnsignedByte(); field != 0; field = body.readUnsignedByte()) {
      String value = readCString(body);
      if (field == 'S') {
        severity = value;
      } else if (field == 'M') {
        text = value;
      }
    }
    return severity + ": " + text;
  }

  private static String requirePassword(String password) throws IOException {
    if (password == null) {
      throw new IOException("the server asks for a password; add password=... to the URL");
    }
    return password;
  }

  static String md5Password(String user, String password, byte[] salt) {
    HexFormat hex = HexFormat.of();
    String inner = hex.formatHex(md5((password + user).getBytes(UTF_8)));
    byte[] innerBytes = inner.getBytes(UTF_8);
    byte[] salted = new byte[innerBytes.length + salt.length];
    System.arraycopy(innerBytes, 0, salted, 0, innerBytes.length);
    System.arraycopy(salt, 0, salted, innerBytes.length, salt.length);
    return "md5" + hex.formatHex(md5(salted));
  }

  private static byte[] md5(byte[] input) {
    try {
      return MessageDigest.getInstance("MD5").digest(input);
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException("every Java runtime has MD5", e);
    }
  }

  private static void send(DataOutputStream out, char type, byte[] body) throws IOException {
    out.writeByte(type);
    out.writeInt(body.length + 4);
    out.write(body);
    out.flush();
  }

  private static Message read(DataInputStream in) throws IOException {
    char type = (char) in.readUnsignedByte();
    int length = in.readInt();
    if (length < 4 || length > 16 * 1024 * 1024) {
      throw new IOException("not a PostgreSQL protocol message (length " + length + ")");
    }
    return new Message(type, in.readNBytes(length - 4));
  }

  private static byte[] cstring(String text) {
    byte[] bytes = text.getBytes(UTF_8);
    byte[] terminated = new byte[bytes.length + 1];
    System.arraycopy(bytes, 0, terminated, 0, bytes.length);
    return terminated;
  }

  private static String readCString(DataInputStream in) throws IOException {
    ByteArrayOutputStream bytes = new ByteArrayOutputStream();
    for (int b = in.readUnsignedByte(); b != 0; b = in.readUnsignedByte()) {
      bytes.write(b);
    }
    return bytes.toString(UTF_8);
  }

  private record Message(char type, byte[] payload) {
    DataInputStream body() {
      return new DataInputStream(new ByteArrayInputStream(payload));
    }
  }
}
