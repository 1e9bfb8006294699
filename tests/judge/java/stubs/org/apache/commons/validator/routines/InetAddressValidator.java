/* mqtool judge: stand-in for commons-validator's InetAddressValidator (not on this machine).
 * RocketMQ's UtilAll uses it to classify host addresses; this version parses literals only,
 * never resolves names. */
package org.apache.commons.validator.routines;

import java.net.Inet6Address;
import java.net.InetAddress;

public class InetAddressValidator {
    private static final InetAddressValidator INSTANCE = new InetAddressValidator();

    public static InetAddressValidator getInstance() {
        return INSTANCE;
    }

    public boolean isValidInet4Address(String s) {
        if (s == null) {
            return false;
        }
        String[] parts = s.split("\\.", -1);
        if (parts.length != 4) {
            return false;
        }
        for (String p : parts) {
            if (p.isEmpty() || p.length() > 3 || !p.chars().allMatch(Character::isDigit)) {
                return false;
            }
            if (Integer.parseInt(p) > 255) {
                return false;
            }
        }
        return true;
    }

    public boolean isValidInet6Address(String s) {
        if (s == null || s.indexOf(':') < 0) {
            return false;
        }
        for (char c : s.toCharArray()) {
            if (!(Character.digit(c, 16) >= 0 || c == ':' || c == '.' || c == '%')) {
                return false;
            }
        }
        try {
            return InetAddress.getByName(s) instanceof Inet6Address;
        } catch (Exception e) {
            return false;
        }
    }
}
