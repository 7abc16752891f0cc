package dev.nolock.lock.kubernetes.internal;

import java.util.regex.Pattern;

/**
 * The Kubernetes naming rules this module checks before anything is sent, so that a name the API
 * server would refuse with HTTP 422 is refused at the call with a message that says how to fix it.
 */
public final class KubernetesNames {

  /** The longest object name the API server accepts for a Lease (a DNS-1123 subdomain). */
  public static final int MAX_SUBDOMAIN_LENGTH = 253;

  /** The longest namespace name (a DNS-1123 label). */
  public static final int MAX_LABEL_LENGTH = 63;

  private static final String LABEL = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
  private static final Pattern SUBDOMAIN = Pattern.compile(LABEL + "(\\." + LABEL + ")*");
  private static final Pattern DNS_LABEL = Pattern.compile(LABEL);
  private static final Pattern PREFIX = Pattern.compile("[a-z0-9][-a-z0-9.]*");

  private KubernetesNames() {}

  /**
   * A Lease object name: a DNS-1123 subdomain (lower-case letters, digits, '-' and '.', starting
   * and ending with a letter or digit, at most {@value #MAX_SUBDOMAIN_LENGTH} characters).
   *
   * @param lockName the caller's lock name, for the message
   * @param leaseName the prefix plus the lock name
   */
  public static String requireLeaseName(String lockName, String leaseName) {
    if (leaseName.length() > MAX_SUBDOMAIN_LENGTH || !SUBDOMAIN.matcher(leaseName).matches()) {
      throw new IllegalArgumentException(
          "The lock name \""
              + lockName
              + "\" gives the Lease name \""
              + leaseName
              + "\", which is not a DNS-1123 subdomain: a Kubernetes object name must be at most "
              + MAX_SUBDOMAIN_LENGTH
              + " characters of lower-case letters, digits, '-' and '.', and start and end with"
              + " a letter or digit. Use a name such as \"invoice-42\"; map other names yourself"
              + " (lower-case them, or use a hex digest of the name).");
    }
    return leaseName;
  }

  /** A namespace: a DNS-1123 label. */
  public static String requireNamespace(String namespace) {
    if (namespace == null) {
      throw new IllegalArgumentException(
          "The namespace is null: pass the namespace dedicated to this application's Leases, e.g."
              + " \"billing\".");
    }
    if (namespace.length() > MAX_LABEL_LENGTH || !DNS_LABEL.matcher(namespace).matches()) {
      throw new IllegalArgumentException(
          "The namespace \""
              + namespace
              + "\" is not a DNS-1123 label: at most "
              + MAX_LABEL_LENGTH
              + " characters of lower-case letters, digits and '-', starting and ending with a"
              + " letter or digit, e.g. \"billing\".");
    }
    return namespace;
  }

  /**
   * A Lease name prefix: lower-case letters, digits, '-' and '.' starting with a letter or digit, 1
   * to 200 characters (the lock name must still fit after it). Never empty: the Lease of a lock
   * would then be named by the lock name alone, and could be a Lease of anyone else in the
   * namespace (client-go's leader election, whose tokens repeat).
   */
  public static String requirePrefix(String prefix) {
    if (prefix != null && prefix.isEmpty()) {
      throw new IllegalArgumentException(
          "The Lease name prefix is empty: a lock's Lease would then be named by the lock name"
              + " alone and could be another elector's Lease in the namespace (client-go's does"
              + " not bump leaseTransitions, so tokens would repeat). Pass a prefix of this"
              + " application's, e.g. \"billing-\", or leave it out to keep \"nolock-\".");
    }
    if (prefix == null || prefix.length() > 200 || !PREFIX.matcher(prefix).matches()) {
      throw new IllegalArgumentException(
          "The Lease name prefix \""
              + prefix
              + "\" must start with a lower-case letter or digit and contain only"
              + " lower-case letters, digits, '-' and '.' (at most 200 characters), e.g."
              + " \"nolock-\".");
    }
    return prefix;
  }
}
