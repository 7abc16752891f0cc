package dev.nolock.ownership.internal;

/**
 * The two conditions of the apply transaction's ownership update, switchable only so that
 * negative-control tests can show what each one catches. Production code always uses {@link #ALL};
 * the public API offers no way to switch them off.
 *
 * @param epochCheck the ownership row must still carry this owner's epoch (off: a zombie owner's
 *     applies are not refused as a whole)
 * @param offsetCheck the partition's last applied offset must be below the record's (off: a replay
 *     applies the record again)
 */
public record Safeguards(boolean epochCheck, boolean offsetCheck) {

  public static final Safeguards ALL = new Safeguards(true, true);
}
